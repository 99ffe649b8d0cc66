//! agw-memory — chat memory: the history of each chat, the chat index, the window of past runs
//! sent back to the model, and the recorder that turns a live run into history lines (contract
//! `docs/contract/memory-jsonl.md`). Two backends keep it behind one API:
//!
//! - **files** (default, [`ChatStore::new`]): one JSON Lines history file per chat
//!   (`<dir>/<chatId>.json`), the chat index (`<dir>/_chats.jsonl`), waiting and run marks and
//!   the seq ledger (`<dir>/_waiting/`); one agw process per directory.
//! - **PostgreSQL** (cargo feature `postgres`: `ChatStore::postgres`, `PgConfig`): the same
//!   lines and index records in tables of one schema, shared by several agw replicas;
//!   `migrate_chats` copies a JSONL directory into it (resumable, idempotent, verified by replay).
//!
//! Owns: [`ChatStore`] (appends, reads, window, latest plan, index upsert/list, waiting marks,
//! explicit trim, chat deletion (on request and by retention) and forking, readiness ping; the
//! run marks of runs in flight and what their history says of them after a crash,
//! [`ChatStore::found_run`]), the seq ledger ([`SeqLedger`]: each run's last seq, one `pwrite`
//! per publish), the storage seam under it (a sealed enum of backends that
//! only move lines, records and marks; everything derived from them is shared), [`Recorder`]
//! (live run → step lines, no I/O), the conversion of stored messages into
//! [`agw_protocol::chat::ChatMessage`]s ([`history_messages`]). The line format itself and the
//! snapshot replay are pure and live in `agw_protocol::history` / `agw_protocol::replay`.
//!
//! Invariants (files):
//! - An append is whole `\n`-terminated lines in one `write` on an `O_APPEND` file under the
//!   chat's lock: concurrent runs of one chat never interleave bytes within a line, and both are
//!   recorded completely.
//! - A torn last line (process killed mid-write, disk full) is skipped by readers with a warning
//!   and isolated on a line of its own before the next append; nothing before it is lost.
//! - Under every fsync policy but `never`, an index upsert returns once its line is durable, and
//!   [`ChatStore::append_final`] once the run's history is. The index's fsyncs are group commits
//!   (`group_sync.rs`): taken outside the index lock, one fsync serves every upsert that appended
//!   before it began, and a failed one fails exactly the upserts it covered.
//!
//! Invariants (PostgreSQL):
//! - An append is one transaction — all its lines or none — that first takes the chat's
//!   advisory lock: appends to one chat are serialised across replicas, and a chat's lines read
//!   back in append order. A committed append is visible to every replica.
//! - An index update reads the chat's record `FOR UPDATE` under the same lock and writes it back
//!   in that transaction: replicas racing on a new chat create it once (one `created: true`)
//!   and record one owner. The record is exactly the line the file index would write.
//! - Schema migrations are embedded, numbered, recorded per schema, and applied under a session
//!   advisory lock, so replicas may start together.
//! - The client is synchronous and blocks: call every method from `spawn_blocking` (its own
//!   small runtime must not be entered on a thread that drives async tasks). An unreachable
//!   server is an error within the connect timeout, never a hang.
//!
//! Invariants (both):
//! - History is never deleted or rewritten implicitly. The window `k` limits what the
//!   model receives; [`ChatStore::trim`] (the reference's trimming) runs only when called.
//! - Storage failures are [`MemoryError`]s carrying the path and the OS error, or the database
//!   operation, the chat and the server's message — never panics.
//!
//! Must never: know about HTTP or SSE framing, or parse-and-rewrite history lines it does not
//! understand.

#![forbid(unsafe_code)]
mod backend;
mod blocks;
mod config;
mod encoded;
mod error;
mod file;
mod flusher;
mod fork;
mod group_sync;
mod ids;
mod index;
mod ledger;
mod lines;
#[cfg(feature = "postgres")]
mod migrate;
#[cfg(feature = "postgres")]
mod pg;
mod recorder;
mod recovery;
mod store;
mod window;

pub use config::{DEFAULT_K, FsyncPolicy, MemoryConfig};
pub use error::MemoryError;
pub use fork::{ForkError, ForkPoint, Forked};
pub use index::{ChatSummary, ChatUpsert, Owner};
pub use ledger::{LedgerEntry, LedgerSlot, SeqLedger};
#[cfg(feature = "postgres")]
pub use migrate::{MigrateReport, migrate_chats};
#[cfg(feature = "postgres")]
pub use pg::PgConfig;
pub use recorder::{Recorder, RecorderInit};
pub use recovery::{FoundRun, InFlightRun};
pub use store::{ChatContext, ChatStore, WaitingRun};
pub use window::{UNRECORDED_RESULT, Window, history_messages, restore_attachments, window};

// The HTTP layer shares one store between tasks and moves a recorder into each run task.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    const fn movable<T: Send>() {}
    shared::<ChatStore>();
    movable::<Recorder>();
};
