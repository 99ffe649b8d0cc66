//! `memory.chat.*` and `agw.memory.enabled`: chat history on disk.

use agw_memory::{FsyncPolicy, MemoryConfig};

use super::ConfigError;
use super::source::Source;
use super::table::{AGW_MEMORY_ENABLED, MEMORY_CHAT_ACTION_TOOLS, MEMORY_CHAT_DIR, MEMORY_CHAT_FSYNC, MEMORY_CHAT_K};
use super::value::{self, ValueError};

/// `memory.chat.*` and `agw.memory.enabled`: chat history on disk.
#[derive(Debug, Clone)]
pub struct MemorySettings {
    /// false runs every query without chat memory (stateless gateway).
    pub enabled: bool,
    /// Directory, history window, fsync policy and action tools of the chat store.
    pub chat: MemoryConfig,
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
