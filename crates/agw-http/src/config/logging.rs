//! `agent.llm.interaction-log.*`: the provider interaction log (the log filter itself is
//! `AGW_LOG`, read by the binary before any setting).

use super::source::Source;
use super::table::{AGENT_LLM_INTERACTION_LOG_ENABLED, AGENT_LLM_INTERACTION_LOG_MASK_SENSITIVE};
use super::{ConfigError, value};

/// `agent.llm.interaction-log.*`: the provider interaction log.
#[derive(Debug, Clone)]
pub struct LoggingSettings {
    /// Log every LLM request, delta and response at debug level (target `agw::llm`).
    pub interaction_log: bool,
    /// Mask secrets in that log.
    pub mask_sensitive: bool,
}

pub(super) fn load(src: &Source) -> Result<LoggingSettings, ConfigError> {
    Ok(LoggingSettings {
        interaction_log: src.parse(&AGENT_LLM_INTERACTION_LOG_ENABLED, value::bool)?,
        mask_sensitive: src.parse(&AGENT_LLM_INTERACTION_LOG_MASK_SENSITIVE, value::bool)?,
    })
}
