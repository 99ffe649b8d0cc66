//! `agw.demo.*`: the embedded offline demo model.

use std::time::Duration;

use super::source::Source;
use super::table::{AGW_DEMO_CHUNK_DELAY_MS, AGW_DEMO_ENABLED};
use super::{ConfigError, value};

/// `agw.demo.*`: the offline demo model.
#[derive(Debug, Clone)]
pub struct DemoSettings {
    /// Register the demo model as provider `demo` (a configured real `demo` provider wins).
    pub enabled: bool,
    /// Pause between two chunks the demo model streams (zero: as fast as possible).
    pub chunk_delay: Duration,
}

pub(super) fn load(src: &Source) -> Result<DemoSettings, ConfigError> {
    Ok(DemoSettings {
        enabled: src.parse(&AGW_DEMO_ENABLED, value::bool)?,
        chunk_delay: src.parse(&AGW_DEMO_CHUNK_DELAY_MS, value::millis)?,
    })
}
