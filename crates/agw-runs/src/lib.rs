//! agw-runs — the run core: a run is a server-side object that outlives the connection that
//! started it, so clients can leave, come back, stop it, redirect it and answer it.
//!
//! Owns: the run service ([`RunService`]: start, attach, interrupt, steer, submit, compact,
//! restoring waiting runs, resuming runs in flight after a crash; deleting, forking and
//! expiring chats) and its one error type ([`RunError`]); the run loop every run goes through,
//! live, restored after a restart, resumed after a crash or adopted from another replica; the sink that turns a run's deltas into events, its history
//! and its buffer ([`sink`]); the run registry ([`RunTracker`]) with each run's [`RunHandle`]
//! (bounded buffer of encoded frames, observers, status, cancellation, steering queue) and one
//! run per chat ([`ChatSlots`]); durable waiting; crash recovery (each run's mark and ledger
//! slot, and resuming at start — or, clustered, taking a lost replica's runs over); quotas
//! ([`quotas`]); the chat-event webhook ([`webhook`]); this replica's part in a cluster
//! (announcing and mirroring runs, forwarding control requests, adopting waiting runs); who may act on what ([`Principal`],
//! [`may_access`]).
//!
//! Must never: depend on hyper, http or any route (the edge — agw-http — turns requests into
//! calls on this crate and its errors into status codes), hold more of a run than its buffer
//! bounds allow, or let an observer slow the run down (a lagging observer is cut off instead).

#![forbid(unsafe_code)]

mod attachments;
mod buffer;
mod calls;
mod chats;
mod cluster;
mod continued;
mod control;
mod cooldowns;
mod drive;
mod durable;
mod error;
mod fork;
pub mod guards;
mod handle;
mod locate;
mod node;
mod output;
mod principal;
pub mod quotas;
mod recover;
mod registry;
mod replica;
mod retention;
mod service;
mod settings;
pub mod sink;
mod start;
mod takeover;
pub mod webhook;

pub use buffer::{BufferLimits, FrameBuffer, Read, ReadEvents};
pub use calls::{Attached, ChatDeleted, Compacted, Interrupted, SteerRequest, Steered, Submitted};
pub use chats::{ChatBusy, ChatSlot, ChatSlots};
pub use error::RunError;
pub use fork::{ChatForked, ForkPosition, ForkRequest, ForkedFrom, ForkedRun};
pub use handle::{
    AttachError, CancelReason, DisconnectPolicy, Mirrored, Observer, RunHandle, RunSpec, RunStatus, lagged_frame,
};
pub use node::Node;
pub use principal::{ANONYMOUS_SUBJECT, Principal, anonymous, may_access};
pub use recover::RECOVERED_RUNS;
pub use registry::{RunGuard, RunTracker, drain};
pub use retention::{RetentionTask, Swept};
pub use service::{
    Catalogs, NoTelemetry, Parts, RecoverySettings, RunService, ServiceSettings, Telemetry, ToolSources,
};
pub use settings::{ChatConcurrency, RunSettings};
pub use start::NewRun;

/// Gauge (`metrics` crate): run tasks in flight on this process.
pub const RUNS_ACTIVE: &str = "agw_runs_active";
/// Counter: runs ended, by `outcome` and `code`.
pub const RUNS_TOTAL: &str = "agw_runs_total";
/// Counter: chats the retention sweep deleted (`agw.memory.retention`).
pub const CHATS_EXPIRED: &str = "agw_chats_expired_total";
/// Counter: events streamed to observers.
pub const EVENTS_STREAMED: &str = "agw_events_streamed_total";
