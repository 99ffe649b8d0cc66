//! Settings: an optional TOML file, overridden by environment variables.
//!
//! Every setting is declared once in [`SETTINGS`] ([`table`]) with its property path (the TOML
//! table path, mirroring `docs/contract/config.md`), its environment variable and its default. Loading,
//! `--help` text and validation all read that table, so a setting cannot exist in one place and
//! not the others. Each concern loads into its own typed section (one small module each).
//!
//! Typos are caught (each reported as an [`UnknownName`]): a file key that names no setting
//! refuses startup, an `AGENT_*` / `AGW_*` / `MEMORY_*` variable that names none is a [`ConfigWarning`].

mod auth;
mod builder;
mod cluster;
mod cors;
mod demo;
mod guardrails;
mod logging;
mod mcp;
mod memory;
mod providers;
mod quotas;
mod resources;
mod runs;
mod sandbox;
mod server;
mod source;
pub mod table;
mod tools;
mod unknown;
mod value;
mod webhook;

use std::collections::HashMap;
use std::path::Path;

use agw_llm::ProviderConfig;

use agw_tools::sandbox::SandboxConfig;
pub use builder::SettingsBuilder;
pub use cluster::{ClusterSettings, DatabaseSettings, RedisSettings, masked_url};
pub use demo::DemoSettings;
pub use guardrails::GuardrailSettings;
pub use logging::LoggingSettings;
pub use mcp::McpSettings;
pub use memory::MemorySettings;
pub use providers::FallbackCooldown;
pub use quotas::{QuotaLimits, QuotaSettings};
pub use resources::{CatalogDir, ResourceSettings};
pub use runs::{ChatConcurrency, RunSettings};
pub use server::{ConnectionLimits, ServerSettings};
pub use table::{PROVIDER_FIELDS, SETTINGS, SettingSpec};
pub use tools::{BashSettings, ToolSettings};
pub use unknown::UnknownName;
pub use value::{ValueError, duration as parse_duration};

use crate::auth::AuthSettings;
use crate::cors::CorsConfig;
use agw_runs::webhook::WebhookConfig;
use source::Source;

/// A configuration problem, always naming the setting.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file, as given.
        path: String,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The config file is not TOML.
    #[error("config file {path} is not valid TOML: {message}")]
    Toml {
        /// The file, as given.
        path: String,
        /// The parser's description, with the position.
        message: String,
    },
    /// One setting has a value it cannot take.
    #[error("setting {property} ({env}): {message}")]
    Invalid {
        /// The setting's dotted name in the config file.
        property: &'static str,
        /// The environment variable that also sets it.
        env: &'static str,
        /// What is wrong with the value.
        message: String,
    },
    /// A `providers` entry is incomplete or contradictory.
    #[error("provider {key}: {message}")]
    Provider {
        /// The provider's key.
        key: String,
        /// What is wrong with the entry.
        message: String,
    },
    /// An `agent.auth.*` problem; the message names the settings involved (docs/contract/http-api.md §9).
    #[error("{message}")]
    Auth {
        /// The whole text shown, naming the settings.
        message: String,
    },
    /// Keys of the config file that name no setting (one line each).
    #[error("{}", unknown_keys(path, keys))]
    UnknownKeys {
        /// The config file.
        path: String,
        /// Every unknown key, each with its nearest setting when one is close.
        keys: Vec<UnknownName>,
    },
}

fn unknown_keys(path: &str, keys: &[UnknownName]) -> String {
    let line = |k: &UnknownName| match &k.suggestion {
        Some(s) => format!("unknown setting `{}` in {path}; did you mean `{s}`?", k.name),
        None => format!("unknown setting `{}` in {path} (`agw serve --help` lists every setting)", k.name),
    };
    keys.iter().map(line).collect::<Vec<_>>().join("\n")
}

/// Something in the configuration that does not stop the server but is probably a mistake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigWarning {
    /// An environment variable with a setting prefix that no setting reads: ignored.
    UnknownVariable(UnknownName),
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigWarning::UnknownVariable(UnknownName { name, suggestion: Some(s) }) => {
                write!(f, "unknown environment variable `{name}` ignored; did you mean `{s}`?")
            }
            ConfigWarning::UnknownVariable(UnknownName { name, suggestion: None }) => write!(
                f,
                "unknown environment variable `{name}` ignored: no agw setting is named like it (`agw serve --help` lists them)"
            ),
        }
    }
}

/// Typed settings of the server, one section per concern.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `server.*`: listening address, limits, timeouts.
    pub server: ServerSettings,
    /// `agent.auth.*`: key sources, validated; [`AuthSettings::enforced`] says whether auth is on.
    pub auth: AuthSettings,
    /// `agent.cors.*`: which browser origins may call the API.
    pub cors: CorsConfig,
    /// Catalog directories (agents, tools, viewports, skills), their rescans, and the data directory.
    pub resources: ResourceSettings,
    /// `agent.tools.*` and `agw.tools.*`: limits and settings of the built-in tools.
    pub tools: ToolSettings,
    /// `memory.chat.*`: whether and where chat history is kept.
    pub memory: MemorySettings,
    /// `agw.runs.*`: run buffers, retention, observers, disconnect policy, chat concurrency.
    pub runs: RunSettings,
    /// `agw.recovery.*`: runs in flight are resumed after a crash (docs/run-lifecycle.md).
    pub recovery: agw_runs::RecoverySettings,
    /// `agw.a2a.enabled`: agents are served over A2A (docs/protocols.md §7).
    pub a2a_enabled: bool,
    /// `agw.console.enabled`: `/` and `/console/` serve the browser console (docs/console.md).
    pub console_enabled: bool,
    /// `agw.a2a.push.*`: A2A push-notification webhooks.
    pub a2a_push: A2aPushSettings,
    /// `agw.quotas.*`: runs, tokens and cost per subject and per agent.
    pub quotas: QuotaSettings,
    /// `agw.database.*`, `agw.redis.*`, `agw.node.id`, `agw.cluster.*`: several replicas.
    pub cluster: ClusterSettings,
    /// `agent.providers.<key>.*`: the model providers, by key; empty when none is configured.
    pub providers: Vec<ProviderConfig>,
    /// `agent.providers.<key>.prices`: what each model costs; a run's `cost` is computed with
    /// them (none configured: no cost is ever shown).
    pub prices: std::sync::Arc<agw_protocol::usage::PriceTable>,
    /// `agw.provider.*`: caps on what one provider response may make agw hold.
    pub provider_limits: agw_llm::ResponseLimits,
    /// `agw.provider.fallback-cooldown*`: how long a model that failed is skipped.
    pub fallback_cooldown: providers::FallbackCooldown,
    /// `agw.mcp.*`: caps on what an MCP server may make agw hold and offer to models.
    pub mcp: McpSettings,
    /// `agent.llm.interaction-log.*`: whether provider traffic is logged, and masked.
    pub logging: LoggingSettings,
    /// `agw.demo.*`: the offline demo model.
    pub demo: DemoSettings,
    /// `agent.chat-event-callback.*`: the signed POST at each run's first content delta.
    pub webhook: WebhookConfig,
    /// `agw.sandbox.*`: confinement of `_bash_` and `_skill_run_script_` processes.
    pub sandbox: SandboxConfig,
    /// `agw.guardrails.*`: rule files, default guards, classifiers (docs/guardrails.md).
    pub guardrails: GuardrailSettings,
    /// Probable mistakes that did not stop loading: `serve` logs them, `agw check` lists them.
    pub warnings: Vec<ConfigWarning>,
}

/// `agw.a2a.push.*` (docs/protocols.md §7, push notifications).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct A2aPushSettings {
    /// Clients may register push-notification webhooks.
    pub enabled: bool,
    /// Webhooks may target non-public addresses (loopback, private, link-local, …).
    pub allow_private_networks: bool,
}

impl Settings {
    /// What the run service is told: the part of these settings runs read.
    pub fn service(&self) -> agw_runs::ServiceSettings {
        agw_runs::ServiceSettings {
            runs: self.runs.clone(),
            memory: self.memory.enabled,
            prices: self.prices.clone(),
            frontend_submit_timeout: self.tools.frontend_submit_timeout,
            tool_output_limit: self.tools.max_output_bytes,
            sub_agents: self.tools.sub_agents,
            skill_max_prompt_chars: self.resources.skill_max_prompt_chars,
            mcp_request_tool_bytes: self.mcp.max_request_tool_bytes,
            quotas: self.quotas,
            webhook: self.webhook.clone(),
            callers_authenticated: self.auth.enforced(),
            guards: self.guardrails.guards.clone(),
            recovery: self.recovery,
            fallback_cooldown: self.fallback_cooldown.min,
            fallback_cooldown_max: self.fallback_cooldown.max,
        }
    }

    /// The cluster this replica joins (`agw.redis.url`); `None`: it runs alone.
    pub fn cluster_config(&self) -> Option<agw_cluster::ClusterConfig> {
        let redis = self.cluster.redis.as_ref()?;
        Some(agw_cluster::ClusterConfig {
            url: redis.url.clone(),
            prefix: redis.prefix.clone(),
            node_id: self.cluster.node_id.clone(),
            lease: self.cluster.lease,
            stream_max_events: self.runs.buffer_events,
            retention: self.runs.retention.max(std::time::Duration::from_secs(1)),
            secret: self.cluster.secret.clone(),
            control_ttl: self.cluster.control_deadline,
            ..agw_cluster::ClusterConfig::default()
        })
    }

    /// Reads `config_file` (if any), then the environment `env` (pass `std::env::vars()`).
    pub fn load(
        config_file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let table = match config_file {
            Some(path) => {
                let path_text = path.display().to_string();
                let text = std::fs::read_to_string(path)
                    .map_err(|source| ConfigError::Read { path: path_text.clone(), source })?;
                let table = text
                    .parse::<toml::Table>()
                    .map_err(|e| ConfigError::Toml { path: path_text.clone(), message: e.to_string() })?;
                let keys = unknown::file_keys(&table);
                if !keys.is_empty() {
                    return Err(ConfigError::UnknownKeys { path: path_text, keys });
                }
                table
            }
            None => toml::Table::new(),
        };
        Self::from_table(table, env)
    }

    /// The defaults, then the settings of `table` (shaped like the config file, its keys
    /// already checked), then the environment `env`.
    fn from_table(table: toml::Table, env: impl IntoIterator<Item = (String, String)>) -> Result<Self, ConfigError> {
        let env: Vec<(String, String)> = env.into_iter().collect();
        let warnings = unknown::env_vars(env.iter().map(|(name, _)| name.as_str()))
            .into_iter()
            .map(ConfigWarning::UnknownVariable)
            .collect();
        // Empty environment values count as unset (docs/contract/config.md §5).
        let env: HashMap<String, String> = env.into_iter().filter(|(_, v)| !v.trim().is_empty()).collect();
        let src = Source { table, env };

        let auth = auth::load(&src)?;
        let (providers, prices) = providers::load(&src)?;
        Ok(Settings {
            server: server::load(&src, &auth)?,
            auth,
            cors: cors::load(&src)?,
            resources: resources::load(&src)?,
            tools: tools::load(&src)?,
            memory: memory::load(&src)?,
            runs: runs::load(&src)?,
            recovery: runs::load_recovery(&src)?,
            a2a_enabled: src.parse(&table::AGW_A2A_ENABLED, value::bool)?,
            console_enabled: src.parse(&table::AGW_CONSOLE_ENABLED, value::bool)?,
            a2a_push: A2aPushSettings {
                enabled: src.parse(&table::AGW_A2A_PUSH_ENABLED, value::bool)?,
                allow_private_networks: src.parse(&table::AGW_A2A_PUSH_ALLOW_PRIVATE_NETWORKS, value::bool)?,
            },
            cluster: cluster::load(&src)?,
            quotas: quotas::load(&src)?,
            providers,
            prices: std::sync::Arc::new(prices),
            provider_limits: providers::limits(&src)?,
            fallback_cooldown: providers::cooldown(&src)?,
            mcp: mcp::load(&src)?,
            logging: logging::load(&src)?,
            demo: demo::load(&src)?,
            webhook: webhook::load(&src)?,
            sandbox: sandbox::load(&src)?,
            guardrails: guardrails::load(&src)?,
            warnings,
        })
    }
}

impl Default for Settings {
    /// Every setting at its default: the bundled demo agents on the offline demo model, auth off,
    /// listening on loopback (what `agw serve` does with no configuration).
    fn default() -> Self {
        Settings::builder().build().expect("the defaults of the settings table are valid")
    }
}

#[cfg(test)]
mod tests;
