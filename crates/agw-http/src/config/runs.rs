//! `agw.runs.*`: the run registry — event buffers, retention, observers, disconnect policy and
//! concurrent queries on one chat (`docs/run-lifecycle.md`).

use std::time::Duration;

use super::source::Source;
use super::table::{
    AGW_RUNS_BUFFER_BYTES, AGW_RUNS_BUFFER_EVENTS, AGW_RUNS_CHAT_CONCURRENCY, AGW_RUNS_DETACH_GRACE,
    AGW_RUNS_MAX_OBSERVERS, AGW_RUNS_RETAINED_BYTES, AGW_RUNS_RETENTION,
};
use super::{ConfigError, value};

/// What a second query into a chat that already has a run in flight gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatConcurrency {
    /// `409` with `{code:"chat_busy", runId}` naming the run to attach to (default).
    Reject,
    /// The new run's stream opens at once and the run starts when the chat's current run ends.
    Queue,
}

/// `agw.runs.*`.
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

pub(super) fn load(src: &Source) -> Result<RunSettings, ConfigError> {
    let at_least_one = |spec: &'static super::table::SettingSpec| -> Result<usize, ConfigError> {
        let n: usize = src.parse(spec, value::whole)?;
        if n == 0 {
            return Err(ConfigError::Invalid {
                property: spec.property,
                env: spec.env,
                message: "must be at least 1".into(),
            });
        }
        Ok(n)
    };
    Ok(RunSettings {
        buffer_events: at_least_one(&AGW_RUNS_BUFFER_EVENTS)?,
        buffer_bytes: at_least_one(&AGW_RUNS_BUFFER_BYTES)?,
        retention: src.parse(&AGW_RUNS_RETENTION, value::duration)?,
        retained_bytes: src.parse(&AGW_RUNS_RETAINED_BYTES, value::whole)?,
        detach_grace: src.parse(&AGW_RUNS_DETACH_GRACE, value::duration)?,
        max_observers: at_least_one(&AGW_RUNS_MAX_OBSERVERS)?,
        chat_concurrency: src.parse(&AGW_RUNS_CHAT_CONCURRENCY, chat_concurrency)?,
    })
}

fn chat_concurrency(s: &str) -> Result<ChatConcurrency, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "reject" => Ok(ChatConcurrency::Reject),
        "queue" => Ok(ChatConcurrency::Queue),
        _ => Err("expected reject or queue".into()),
    }
}
