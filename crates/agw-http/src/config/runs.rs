//! `agw.runs.*`: the run registry — event buffers, retention, observers, disconnect policy and
//! concurrent queries on one chat (`docs/run-lifecycle.md`).

use super::ConfigError;
use super::source::Source;
use super::table::{
    AGW_RECOVERY_ENABLED, AGW_RECOVERY_MAX_AGE, AGW_RECOVERY_MAX_ATTEMPTS, AGW_RUNS_BUFFER_BYTES,
    AGW_RUNS_BUFFER_EVENTS, AGW_RUNS_CHAT_CONCURRENCY, AGW_RUNS_DETACH_GRACE, AGW_RUNS_MAX_OBSERVERS,
    AGW_RUNS_RETAINED_BYTES, AGW_RUNS_RETENTION,
};
use super::value::{self, ValueError};

pub use agw_runs::{ChatConcurrency, RecoverySettings, RunSettings};

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

/// `agw.recovery.*`: crash recovery (`docs/run-lifecycle.md`).
pub(super) fn load_recovery(src: &Source) -> Result<RecoverySettings, ConfigError> {
    Ok(RecoverySettings {
        enabled: src.parse(&AGW_RECOVERY_ENABLED, value::bool)?,
        max_age: src.parse(&AGW_RECOVERY_MAX_AGE, value::duration)?,
        max_attempts: src.parse(&AGW_RECOVERY_MAX_ATTEMPTS, value::whole)?,
    })
}

fn chat_concurrency(s: &str) -> Result<ChatConcurrency, ValueError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "reject" => Ok(ChatConcurrency::Reject),
        "queue" => Ok(ChatConcurrency::Queue),
        _ => Err(ValueError::Expected("reject or queue")),
    }
}
