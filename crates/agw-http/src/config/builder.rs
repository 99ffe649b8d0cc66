//! Settings from code, for services that embed agw: the defaults, then settings named by their
//! property paths (the config file's, `agw serve --help` lists them), parsed and checked by the
//! same rules as the file. Nothing is read from the process environment or the disk.

use super::{ConfigError, Settings, unknown};

/// Builds [`Settings`] without a config file or environment variables.
///
/// ```
/// let settings = agw_http::Settings::builder()
///     .set("server.port", "0")
///     .set("agw.memory.enabled", "false")
///     .set("agent.providers.local.base-url", "http://127.0.0.1:11434/v1")
///     .set("agent.providers.local.api-key", "unused")
///     .set("agent.providers.local.model", "qwen3")
///     .build()
///     .unwrap();
/// assert_eq!(settings.server.port, 0);
/// assert!(!settings.memory.enabled);
/// ```
#[derive(Debug, Clone, Default)]
pub struct SettingsBuilder {
    table: toml::Table,
}

impl Settings {
    /// A builder starting from the defaults ([`SettingsBuilder`]).
    pub fn builder() -> SettingsBuilder {
        SettingsBuilder::default()
    }
}

impl SettingsBuilder {
    /// Sets the setting at `property` (`server.port`, `agent.providers.<key>.base-url`, …) to
    /// `value`, written as in the environment variable (`15s`, `true`, comma-separated lists).
    /// A later value for the same property wins. Unknown properties fail [`Self::build`].
    pub fn set(mut self, property: &str, value: impl Into<String>) -> Self {
        let mut segments: Vec<&str> = property.trim().split('.').collect();
        let key = segments.pop().unwrap_or_default();
        let mut table = &mut self.table;
        for segment in segments {
            let entry = table.entry(segment).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if !entry.is_table() {
                // A value set where a table now goes: the later, deeper setting wins.
                *entry = toml::Value::Table(toml::Table::new());
            }
            table = entry.as_table_mut().expect("made a table above");
        }
        table.insert(key.to_owned(), toml::Value::String(value.into()));
        self
    }

    /// The settings, or the first problem: an unknown property (with the nearest known one), a
    /// value a setting cannot take, an incomplete provider — as `agw serve` would report them.
    pub fn build(self) -> Result<Settings, ConfigError> {
        let keys = unknown::file_keys(&self.table);
        if !keys.is_empty() {
            return Err(ConfigError::UnknownKeys { path: "Settings::builder()".into(), keys });
        }
        Settings::from_table(self.table, std::iter::empty())
    }
}
