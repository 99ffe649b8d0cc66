//! `memory.chat.*` and `agw.memory.*`: chat history, and how long it is kept.

use std::time::Duration;

use agw_memory::{FsyncPolicy, MemoryConfig};

use super::ConfigError;
use super::source::Source;
use super::table::{
    AGW_MEMORY_ENABLED, AGW_MEMORY_RETENTION, AGW_MEMORY_RETENTION_SWEEP, MEMORY_CHAT_ACTION_TOOLS, MEMORY_CHAT_DIR,
    MEMORY_CHAT_FSYNC, MEMORY_CHAT_K,
};
use super::value::{self, ValueError};

/// `memory.chat.*` and `agw.memory.enabled`: chat history on disk.
#[derive(Debug, Clone)]
pub struct MemorySettings {
    /// false runs every query without chat memory (stateless gateway).
    pub enabled: bool,
    /// Directory, history window, fsync policy and action tools of the chat store.
    pub chat: MemoryConfig,
    /// `agw.memory.retention`: chats untouched this long are deleted by the server; zero
    /// (the default) keeps them forever.
    pub retention: Duration,
    /// `agw.memory.retention-sweep`: how often the server looks for them.
    pub retention_sweep: Duration,
}

pub(super) fn load(src: &Source) -> Result<MemorySettings, ConfigError> {
    Ok(MemorySettings {
        enabled: src.parse(&AGW_MEMORY_ENABLED, value::bool)?,
        chat: MemoryConfig {
            dir: src.parse(&MEMORY_CHAT_DIR, value::path)?,
            k: src.parse(&MEMORY_CHAT_K, value::whole::<usize>)?.max(1),
            fsync: src.parse(&MEMORY_CHAT_FSYNC, fsync)?,
            action_tools: src
                .parse_opt(&MEMORY_CHAT_ACTION_TOOLS, value::list)?
                .unwrap_or_default()
                .into_iter()
                .map(|t| t.to_lowercase())
                .collect(),
        },
        retention: src.parse(&AGW_MEMORY_RETENTION, value::duration)?,
        retention_sweep: src.parse(&AGW_MEMORY_RETENTION_SWEEP, value::duration)?,
    })
}

fn fsync(s: &str) -> Result<FsyncPolicy, ValueError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "never" => Ok(FsyncPolicy::Never),
        "step" => Ok(FsyncPolicy::EveryStep),
        "run" => Ok(FsyncPolicy::EveryRun),
        "complete" => Ok(FsyncPolicy::Complete),
        _ => Err(ValueError::Expected("never, step, run or complete")),
    }
}
