//! Settings: an optional TOML file, overridden by environment variables.
//!
//! Every setting is declared once in [`SETTINGS`] ([`table`]) with its property path (the TOML
//! table path, mirroring `config.md`), its environment variable and its default. Loading,
//! `--help` text and validation all read that table, so a setting cannot exist in one place and
//! not the others. Each concern loads into its own typed section (one small module each).

mod auth;
mod cors;
mod demo;
mod logging;
mod memory;
mod providers;
mod resources;
mod server;
mod source;
pub mod table;
mod tools;
mod value;
mod webhook;

use std::collections::HashMap;
use std::path::Path;

use agw_llm::ProviderConfig;

pub use demo::DemoSettings;
pub use logging::LoggingSettings;
pub use memory::MemorySettings;
pub use resources::{CatalogDir, ResourceSettings};
pub use server::ServerSettings;
pub use table::{PROVIDER_FIELDS, SETTINGS, SettingSpec};
pub use tools::{BashSettings, ToolSettings};
pub use value::duration as parse_duration;

use crate::auth::AuthSettings;
use crate::cors::CorsConfig;
use crate::webhook::WebhookConfig;
use source::Source;

/// A configuration problem, always naming the setting.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("config file {path} is not valid TOML: {message}")]
    Toml { path: String, message: String },
    #[error("setting {property} ({env}): {message}")]
    Invalid { property: &'static str, env: &'static str, message: String },
    #[error("provider {key}: {message}")]
    Provider { key: String, message: String },
    /// An `agent.auth.*` problem; the message names the settings involved (http-api.md §9).
    #[error("{message}")]
    Auth { message: String },
}

/// Typed settings of the server, one section per concern.
#[derive(Debug, Clone)]
pub struct Settings {
    pub server: ServerSettings,
    /// `agent.auth.*`: key sources, validated; [`AuthSettings::enforced`] says whether auth is on.
    pub auth: AuthSettings,
    pub cors: CorsConfig,
    pub resources: ResourceSettings,
    pub tools: ToolSettings,
    pub memory: MemorySettings,
    pub providers: Vec<ProviderConfig>,
    pub logging: LoggingSettings,
    pub demo: DemoSettings,
    pub webhook: WebhookConfig,
}

impl Settings {
    /// Reads `config_file` (if any), then the environment `env` (pass `std::env::vars()`).
    pub fn load(
        config_file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let table = match config_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
                text.parse::<toml::Table>()
                    .map_err(|e| ConfigError::Toml { path: path.display().to_string(), message: e.to_string() })?
            }
            None => toml::Table::new(),
        };
        // Empty environment values count as unset (config.md §5).
        let env: HashMap<String, String> = env.into_iter().filter(|(_, v)| !v.trim().is_empty()).collect();
        let src = Source { table, env };

        let auth = auth::load(&src)?;
        Ok(Settings {
            server: server::load(&src, &auth)?,
            auth,
            cors: cors::load(&src)?,
            resources: resources::load(&src)?,
            tools: tools::load(&src)?,
            memory: memory::load(&src)?,
            providers: providers::load(&src)?,
            logging: logging::load(&src)?,
            demo: demo::load(&src)?,
            webhook: webhook::load(&src)?,
        })
    }
}

#[cfg(test)]
mod tests;
