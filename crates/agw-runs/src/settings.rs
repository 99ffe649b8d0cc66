//! What the registry is told: buffer bounds, retention, the detach grace, observers and what a
//! second query into a busy chat gets. agw-http loads it from `agw.runs.*`.

use std::time::Duration;

/// What a second query into a chat that already has a run in flight gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatConcurrency {
    /// `409` with `{code:"chat_busy", runId}` naming the run to attach to (default).
    Reject,
    /// The new run's stream opens at once and the run starts when the chat's current run ends.
    Queue,
}

/// The registry's limits (`agw.runs.*` in agw-http's settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSettings {
    /// Most events one run's buffer holds; older ones are dropped (attach then gets 409).
    pub buffer_events: usize,
    /// Most bytes of SSE frames one run's buffer holds.
    pub buffer_bytes: usize,
    /// How long a finished run stays attachable.
    pub retention: Duration,
    /// Bytes of all finished runs' buffers kept for attach; the oldest finished runs go first.
    pub retained_bytes: usize,
    /// How long a run with nobody watching keeps going before it is cancelled.
    pub detach_grace: Duration,
    /// Most observers (the query's own stream included) of one run at once; more get 429.
    pub max_observers: usize,
    /// Concurrent queries on one chat.
    pub chat_concurrency: ChatConcurrency,
}

impl Default for RunSettings {
    fn default() -> Self {
        Self {
            buffer_events: 10_000,
            buffer_bytes: 8 << 20,
            retention: Duration::from_secs(300),
            retained_bytes: 64 << 20,
            detach_grace: Duration::from_secs(30),
            max_observers: 1_000,
            chat_concurrency: ChatConcurrency::Reject,
        }
    }
}
