//! agw-runs — the run core: a run is a server-side object that outlives the connection that
//! started it, so clients can leave, come back, stop it, redirect it and answer it.
//!
//! Owns: the run registry ([`RunTracker`]: runs by id while they run and for the retention
//! window, the count of run tasks, draining them at shutdown), each run's [`RunHandle`] (its
//! bounded buffer of encoded frames, observers, status, cancellation, steering queue), one run
//! per chat ([`ChatSlots`]) and the registry's limits ([`RunSettings`]).
//!
//! Must never: depend on hyper, http or any route (the edge — agw-http — turns requests into
//! calls on this crate and its errors into status codes), hold more of a run than its buffer
//! bounds allow, or let an observer slow the run down (a lagging observer is cut off instead).
//!
//! This is the first part of the run core to leave agw-http; the run service itself (start,
//! attach, interrupt, steer, submit, durable waiting, cluster glue) follows it here.

#![forbid(unsafe_code)]

mod buffer;
mod chats;
mod handle;
mod registry;
mod settings;

pub use buffer::{BufferLimits, FrameBuffer, Read};
pub use chats::{ChatBusy, ChatSlot, ChatSlots};
pub use handle::{
    AttachError, CancelReason, DisconnectPolicy, Mirrored, Observer, RunHandle, RunSpec, RunStatus, lagged_frame,
};
pub use registry::{RunGuard, RunTracker, drain};
pub use settings::{ChatConcurrency, RunSettings};

/// Gauge (`metrics` crate): run tasks in flight on this process.
pub const RUNS_ACTIVE: &str = "agw_runs_active";
