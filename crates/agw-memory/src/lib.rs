//! agw-memory — chat memory: one JSON Lines history file per chat (`<dir>/<chatId>.json`), the
//! chat index (`<dir>/_chats.jsonl`), the window of past runs sent back to the model, and the
//! recorder that turns a live run into history lines (contract `memory-jsonl.md`).
//!
//! Owns: [`ChatStore`] (appends, reads, window, latest plan, index upsert/list, explicit trim),
//! [`Recorder`] (live run → step lines, no I/O), the conversion of stored messages into
//! [`agw_protocol::chat::ChatMessage`]s ([`history_messages`]). The line format itself and the
//! snapshot replay are pure and live in `agw_protocol::history` / `agw_protocol::replay`.
//!
//! Invariants:
//! - An append is whole `\n`-terminated lines in one `write` on an `O_APPEND` file under the
//!   chat's lock: concurrent runs of one chat never interleave bytes within a line, and both are
//!   recorded completely.
//! - A torn last line (process killed mid-write, disk full) is skipped by readers with a warning
//!   and isolated on a line of its own before the next append; nothing before it is lost.
//! - History on disk is never deleted or rewritten implicitly. The window `k` limits what the
//!   model receives; [`ChatStore::trim`] (the reference's trimming) runs only when called.
//! - Storage failures are [`MemoryError`]s carrying the path and the OS error, never panics.
//!
//! Must never: know about HTTP or SSE framing, or parse-and-rewrite history lines it does not
//! understand.

#![forbid(unsafe_code)]
mod config;
mod error;
mod file;
mod index;
mod recorder;
mod store;
mod window;

pub use config::{DEFAULT_K, FsyncPolicy, MemoryConfig};
pub use error::MemoryError;
pub use index::{ChatSummary, ChatUpsert, Owner};
pub use recorder::{Recorder, RecorderInit};
pub use store::{ChatStore, RunContext, WaitingRun};
pub use window::{UNRECORDED_RESULT, Window, history_messages, window};

// The HTTP layer shares one store between tasks and moves a recorder into each run task.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    const fn movable<T: Send>() {}
    shared::<ChatStore>();
    movable::<Recorder>();
};
